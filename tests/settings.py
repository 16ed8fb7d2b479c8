"""Settings of the test suite: the app's own (DEBUG off, as in production), served over plain
HTTP to the test client and the browser tests, and connected as the owner role, since the
suite creates, truncates and drops its database. What production adds on top (HTTPS redirect,
secure cookies, HSTS) is tested with the real settings module (tests/test_deploy_settings.py).
"""

from bloomops.settings import *  # noqa: F403
from bloomops.settings import DATABASE_ROLES, DATABASES

BLOOMOPS_DB_ROLE = "owner"
DATABASES["default"].update(DATABASE_ROLES["owner"])

SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0
