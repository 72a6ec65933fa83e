import sys

from xlm_fairseq.convert.cli import main

sys.exit(main())
