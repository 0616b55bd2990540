import sys

from kgplm.cli import main

sys.exit(main())
