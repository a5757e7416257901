from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api import views
from agents.api.errors import json_404

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("facts/", views.FactListView.as_view(), name="api-facts"),
    path("facts/<int:fact_id>/", views.FactDetailView.as_view(), name="api-fact"),
    path("facts/<int:fact_id>/supersede/", views.FactSupersedeView.as_view(), name="api-fact-supersede"),
    path("episodes/", views.EpisodeCreateView.as_view(), name="api-episodes"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Unknown API paths answer in the API's error format, in DEBUG too.
    re_path(r"^.*$", json_404),
]
