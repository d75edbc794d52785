"""`ngrules.testing`, the public name of the hypothesis strategies and `check_rewrite`
(they live in `ngrules.verification.testing`)."""

from ngrules.verification.testing import *  # noqa: F403
from ngrules.verification.testing import __all__  # noqa: F401
