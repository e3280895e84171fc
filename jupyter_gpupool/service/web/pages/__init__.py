"""The HTML pages: the page base (:mod:`.base`), the pages that show (:mod:`.views`), the admin
page and its forms (:mod:`.admin`), the charts as plain geometry (:mod:`.charts`), and the
templates (:mod:`.templating`, ``templates/``, ``static/``)."""
