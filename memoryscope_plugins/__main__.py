"""`python -m memoryscope_plugins` is the `memoryscope-plugins` command."""

import sys

from .cli.main import main

sys.exit(main())
