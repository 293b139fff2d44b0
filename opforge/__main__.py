import sys

from opforge.cli import main

sys.exit(main())
