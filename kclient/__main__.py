"""``python -m kclient`` is the ``kclient`` command."""

import sys

from kclient.cli.main import main

sys.exit(main())
