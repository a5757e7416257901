from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api import views, views_policies
from agents.api.errors import json_404

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("preamble/", views.PreambleView.as_view(), name="api-preamble"),
    path("search/", views.SearchView.as_view(), name="api-search"),
    path("facts/", views.FactListView.as_view(), name="api-facts"),
    path("facts/<int:fact_id>/", views.FactDetailView.as_view(), name="api-fact"),
    path("facts/<int:fact_id>/supersede/", views.FactSupersedeView.as_view(), name="api-fact-supersede"),
    path("remember/", views.RememberView.as_view(), name="api-remember"),
    path("consolidate/", views.ConsolidateView.as_view(), name="api-consolidate"),
    path("harmonize/", views.HarmonizeView.as_view(), name="api-harmonize"),
    path("episodes/", views.EpisodeCreateView.as_view(), name="api-episodes"),
    path("policies/", views_policies.PolicyListView.as_view(), name="api-policies"),
    path(
        "policies/<int:policy_id>/supersede/",
        views_policies.PolicySupersedeView.as_view(),
        name="api-policy-supersede",
    ),
    path("conflicts/", views_policies.ConflictListView.as_view(), name="api-conflicts"),
    path("me/notes/", views_policies.MyNotesView.as_view(), name="api-my-notes"),
    path("me/observations/", views_policies.MyObservationsView.as_view(), name="api-my-observations"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Unknown API paths answer in the API's error format, in DEBUG too.
    re_path(r"^.*$", json_404),
]
