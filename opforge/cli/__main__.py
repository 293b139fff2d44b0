import sys

from opforge.cli.main import main

sys.exit(main())
