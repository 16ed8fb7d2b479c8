from django.conf import settings

from bloomops.accounts.models import COMMAND_LINE
from bloomops.accounts.roles import roles_of
from bloomops.accounts.signatures import password_given_by
from bloomops.memo import per_request


def roles(request):
    user = getattr(request, "user", None)
    user_roles = roles_of(user)
    # a whole page, not a panel's refresh: asked once per page a person opens
    whole_page = request.headers.get("HX-Request") != "true"
    given = per_request(request, "password_given_by",
                        lambda: password_given_by(user.get_username())) \
        if whole_page and user_roles else None
    return {
        "user_roles": sorted(user_roles),
        "is_operator": bool(user_roles & {"operator", "admin"}),
        "is_admin": "admin" in user_roles,
        "is_human_worker": bool(user_roles & {"worker_human", "admin"}),
        "password_given_by": given.by if given else None,
        "password_given_until": given.until if given else None,
        # set from a shell: whoever ran it is not known, so no approval at all until changed
        "password_from_shell": bool(given) and given.by == COMMAND_LINE,
        "decides_no_approval": bool(given) and given.decides_nothing,
        # the page warns before an idle sign-out (bloomops.js)
        "session_idle_seconds": settings.SESSION_IDLE_SECONDS,
    }
