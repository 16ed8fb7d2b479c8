from bloomops.accounts.roles import roles_of
from bloomops.accounts.signatures import password_given_by


def roles(request):
    user = getattr(request, "user", None)
    user_roles = roles_of(user)
    # a whole page, not a panel's refresh: asked once per page a person opens
    whole_page = request.headers.get("HX-Request") != "true"
    return {
        "user_roles": sorted(user_roles),
        "is_operator": bool(user_roles & {"operator", "admin"}),
        "is_admin": "admin" in user_roles,
        "is_human_worker": bool(user_roles & {"worker_human", "admin"}),
        "password_given_by": _given(request, user) if whole_page and user_roles else None,
    }


def _given(request, user) -> str | None:
    # once per request, however many templates it renders
    if not hasattr(request, "_bloomops_password_given_by"):
        request._bloomops_password_given_by = password_given_by(user.get_username())
    return request._bloomops_password_given_by
