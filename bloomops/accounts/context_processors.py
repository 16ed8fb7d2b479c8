from bloomops.accounts.roles import roles_of


def roles(request):
    user_roles = roles_of(getattr(request, "user", None))
    return {
        "user_roles": sorted(user_roles),
        "is_operator": bool(user_roles & {"operator", "admin"}),
        "is_admin": "admin" in user_roles,
        "is_human_worker": bool(user_roles & {"worker_human", "admin"}),
    }
