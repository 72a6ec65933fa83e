import sys

from recipes.train.cli import main

sys.exit(main())
