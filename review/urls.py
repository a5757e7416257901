from django.urls import path, re_path

from review import (
    views,
    views_auth,
    views_decisions,
    views_erasure,
    views_held,
    views_pages,
    views_queue,
    views_queue_bulk,
    views_remember,
    views_runs,
)

app_name = "review"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", views_auth.SignInView.as_view(), name="login"),
    path("logout/", views_auth.SignOutView.as_view(), name="logout"),
    path("review/", views_queue.queue_page, name="queue"),
    path("review/bulk/", views_queue_bulk.queue_bulk, name="queue-bulk"),
    re_path(
        r"^review/(?P<kind>candidate|conflict|possible|challenged)/(?P<pk>[0-9]+)/$",
        views_queue.queue_detail,
        name="queue-detail",
    ),
    re_path(
        r"^review/(?P<kind>candidate|conflict|possible|challenged)/(?P<pk>[0-9]+)/decide/$",
        views_queue.queue_decide,
        name="queue-decide",
    ),
    path("review/candidate/<int:pk>/diff/", views_queue.candidate_diff, name="candidate-diff"),
    path("review/candidate/<int:pk>/complete/", views_held.candidate_complete, name="candidate-complete"),
    path("access/<slug:slug>/", views_pages.grants, name="grants"),
    path("access/<slug:slug>/grant/", views_pages.grant_set, name="grant-set"),
    path("access/<slug:slug>/changes/", views_pages.grant_changes, name="grant-changes"),
    path("memory/<slug:slug>/", views_pages.browser, name="browser"),
    path("memory/<slug:slug>/facts/<int:fact_id>/", views_pages.fact_detail, name="fact"),
    path("memory/<slug:slug>/facts/<int:fact_id>/supersede/", views_pages.fact_supersede, name="fact-supersede"),
    path("memory/<slug:slug>/facts/<int:fact_id>/archive/", views_pages.fact_archive, name="fact-archive"),
    path("memory/<slug:slug>/policies/", views_pages.policies, name="policies"),
    path("memory/<slug:slug>/policies/budget/", views_pages.policy_budget, name="policy-budget"),
    path("memory/<slug:slug>/policies/<int:policy_id>/", views_pages.policy_action, name="policy-action"),
    path("memory/<slug:slug>/graph/", views_pages.graph, name="graph"),
    path("memory/<slug:slug>/erase/", views_erasure.erase_page, name="erase"),
    path("memory/<slug:slug>/graph.json", views_pages.graph_json, name="graph-json"),
    path("memory/<slug:slug>/decisions/new/", views_decisions.meeting_decisions, name="decisions"),
    path("review/runs/<int:run_id>/", views_runs.run_page, name="run"),
    path("review/remember/<int:review_id>/", views_remember.remember_review, name="remember-review"),
    path(
        "review/remember/<int:review_id>/items/<int:item_id>/",
        views_remember.remember_item,
        name="remember-item",
    ),
    path(
        "review/remember/<int:review_id>/items/<int:item_id>/file",
        views_remember.remember_item_file,
        name="remember-item-file",
    ),
    path("review/remember/<int:review_id>/note/", views_remember.remember_note, name="remember-note"),
    path("review/remember/<int:review_id>/approve/", views_remember.remember_approve, name="remember-approve"),
    path("review/remember/<int:review_id>/reject/", views_remember.remember_reject, name="remember-reject"),
]
