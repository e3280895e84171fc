"""What every front end shows the same way: tables, CSV cells and ages, the rows of pools,
shapes and bookings for the API and the pages, report rows, a server's GPU use in words, and the
launch options (what a user may choose, and how each choice reads).

The CLI, the magics, the launch panel, the spawner's form and the service's pages read these;
no other room of the core imports this one, and it never imports :mod:`..admission`.
"""
