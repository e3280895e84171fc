import sys

from jupyter_gpupool.cli import main

sys.exit(main())
