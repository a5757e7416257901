from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api import (
    views,
    views_candidates,
    views_decisions,
    views_erasures,
    views_policies,
    views_reviews,
    views_runs,
)
from agents.api.errors import json_404

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("preamble/", views.PreambleView.as_view(), name="api-preamble"),
    path("search/", views.SearchView.as_view(), name="api-search"),
    path("facts/", views.FactListView.as_view(), name="api-facts"),
    path("facts/batch/", views.FactBatchView.as_view(), name="api-facts-batch"),
    path("facts/<int:fact_id>/", views.FactDetailView.as_view(), name="api-fact"),
    path("facts/<int:fact_id>/supersede/", views.FactSupersedeView.as_view(), name="api-fact-supersede"),
    path("remember/", views.RememberView.as_view(), name="api-remember"),
    path("consolidate/", views.ConsolidateView.as_view(), name="api-consolidate"),
    path("harmonize/", views.HarmonizeView.as_view(), name="api-harmonize"),
    path("episodes/", views.EpisodeCreateView.as_view(), name="api-episodes"),
    path("decisions/", views_decisions.MeetingDecisionsView.as_view(), name="api-decisions"),
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
    path("candidates/", views_candidates.CandidateListView.as_view(), name="api-candidates"),
    path("candidates/<int:candidate_pk>/", views_candidates.CandidateDetailView.as_view(), name="api-candidate"),
    path(
        "candidates/<int:candidate_pk>/replays/",
        views_candidates.CandidateReplayView.as_view(),
        name="api-candidate-replays",
    ),
    path(
        "candidates/<int:candidate_pk>/promote/",
        views_candidates.CandidatePromoteView.as_view(),
        name="api-candidate-promote",
    ),
    path(
        "candidates/<int:candidate_pk>/deny/", views_candidates.CandidateDenyView.as_view(), name="api-candidate-deny"
    ),
    path("reviews/", views_reviews.ReviewListView.as_view(), name="api-reviews"),
    path("reviews/<int:review_id>/", views_reviews.ReviewDetailView.as_view(), name="api-review"),
    path("reviews/<int:review_id>/consume/", views_reviews.ReviewConsumeView.as_view(), name="api-review-consume"),
    # Memory agent runs (SPEC §9)
    path("runs/", views_runs.RunCreateView.as_view(), name="api-runs"),
    path("runs/<int:run_id>/bank/", views_runs.RunBankView.as_view(), name="api-run-bank"),
    path("runs/<int:run_id>/bank/status/", views_runs.RunStatusView.as_view(), name="api-run-bank-status"),
    path("runs/<int:run_id>/bank/knowledge/", views_runs.RunKnowledgeView.as_view(), name="api-run-bank-knowledge"),
    path("runs/<int:run_id>/bank/procedural/", views_runs.RunProceduralView.as_view(), name="api-run-bank-procedural"),
    path("runs/<int:run_id>/bank/items/<str:item_id>/", views_runs.RunItemView.as_view(), name="api-run-bank-item"),
    path("runs/<int:run_id>/interventions/", views_runs.RunInterventionView.as_view(), name="api-run-interventions"),
    path("runs/<int:run_id>/finish/", views_runs.RunFinishView.as_view(), name="api-run-finish"),
    # People only (issue 21): workspace admins, signed in; never an agent tool.
    path("admin/erasures/preview/", views_erasures.ErasurePreviewView.as_view(), name="api-admin-erasure-preview"),
    path("admin/erasures/", views_erasures.ErasureView.as_view(), name="api-admin-erasures"),
    # Unknown API paths answer in the API's error format, in DEBUG too.
    re_path(r"^.*$", json_404),
]
