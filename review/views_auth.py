"""The site's own sign-in (issue 16 §4): every member signs in here, staff or not. The admin's
login stays for staff; what a signed-in person sees is decided by membership (review/access.py)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views


class SignInView(auth_views.LoginView):
    """Django's LoginView: CSRF-protected, and `next=` is followed only to this site
    (url_has_allowed_host_and_scheme), anything else lands on LOGIN_REDIRECT_URL."""

    template_name = "review/login.html"
    redirect_authenticated_user = True


class SignOutView(auth_views.LogoutView):
    """POST only (Django 5), so a link or an image elsewhere cannot sign anyone out."""

    next_page = "review:login"
