"""``python -m sidebyside.publish ...``: the publisher's command line (:mod:`.cli`)."""

import sys

from sidebyside.publish.cli import main

sys.exit(main())
