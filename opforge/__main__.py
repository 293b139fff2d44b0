import sys

from opforge.cli.program import main

sys.exit(main())
