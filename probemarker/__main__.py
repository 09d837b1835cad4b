"""`python -m probemarker` runs the command line."""

import sys

from probemarker.cli import main

sys.exit(main())
