"""The site's own sign-in (issue 16 §4): every member signs in here, staff or not. The admin's
login stays for staff; what a signed-in person sees is decided by membership (review/access.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


class SignInView(auth_views.LoginView):
    """Django's LoginView: CSRF-protected, and `next=` is followed only to this site
    (url_has_allowed_host_and_scheme), anything else lands on LOGIN_REDIRECT_URL."""

    template_name = "review/login.html"
    redirect_authenticated_user = True


class SignOutView(auth_views.LogoutView):
    """Signing out is a POST (Django 5), so a link or an image elsewhere cannot sign anyone out.
    A GET (a typed or bookmarked /logout/) answers a page with the sign-out button, or the sign-in
    page to someone already signed out, instead of a bare 405."""

    next_page = "review:login"
    http_method_names = ["get", "post", "options"]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect("review:login")
        return render(request, "review/logout.html")
