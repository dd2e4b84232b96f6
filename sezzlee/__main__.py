import sys

from sezzlee.cli import main

sys.exit(main())
