import sys

from gpuc.main import main

sys.exit(main())
