from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api import views
from agents.api.errors import json_404

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Unknown API paths answer in the API's error format, in DEBUG too.
    re_path(r"^.*$", json_404),
]
