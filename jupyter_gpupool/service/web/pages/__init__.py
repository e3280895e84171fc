"""The HTML pages: the page base (:mod:`.base`); the pages that show, one module per page or
family (:mod:`.user`, :mod:`.pools`, :mod:`.nodes`, :mod:`.reports`, :mod:`.idle`) and the parts
they share (:mod:`.parts`); the admin page and its forms (:mod:`.admin`); the charts as plain
geometry (:mod:`.charts`); and the templates (:mod:`.templating`, ``templates/``, ``static/``)."""
