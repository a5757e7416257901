"""Issue 37, point 3, without a browser: refused edits come back with what was typed and each
field's error beside it (the fact page's edit, a policy's edit and the policy budget, the erasure
page), and a deprecation needs a reason."""

import pytest
from django.conf import settings
from django.urls import reverse

from memory.models import Fact, Policy, Workspace
from tests.factories import PolicyFactory
from tests.review.queue_items import challenged, fact

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reviewer_reviews_world_domains")]
HX = {"HTTP_HX_REQUEST": "true"}
ERASE = "/memory/acme/erase/"


def test_a_too_long_fact_edit_answers_400_with_the_typed_text_and_reason(world, client):
    live = fact(world.coder, world.architecture, "cache", "The cache TTL is 60 seconds.")
    client.force_login(world.reviewer)
    typed = "x" * (settings.ENGRAM_FACT_MAX_CHARS + 1)
    url = reverse("review:fact-supersede", args=[world.workspace.slug, live.pk])
    response = client.post(url, {"content": typed, "reason": "a <b>reason</b>"})
    html = response.content.decode()
    assert response.status_code == 400
    assert f">{typed}</textarea>" in html
    assert 'value="a &lt;b&gt;reason&lt;/b&gt;"' in html  # kept, and escaped
    assert 'data-testid="error-content"' in html and f"At most {settings.ENGRAM_FACT_MAX_CHARS} characters" in html
    assert Fact.objects.get(pk=live.pk).superseded_by_id is None


def test_a_refused_policy_edit_comes_back_open_with_the_typed_rule_and_reason(world, client):
    policy = PolicyFactory(domain=world.architecture, rule="Run the tests before pushing.")
    client.force_login(world.admin_user)
    typed = "y" * 5000
    url = reverse("review:policy-action", args=[world.workspace.slug, policy.pk])
    response = client.post(url, {"action": "supersede", "rule": typed, "reason": "longer"}, **HX)
    html = response.content.decode()
    assert response.status_code == 422
    assert f">{typed}</textarea>" in html and 'value="longer"' in html
    assert 'data-testid="error-rule"' in html and "At most" in html
    assert "<details open>" in html and f'aria-describedby="error-rule-{policy.pk}"' in html
    assert Policy.objects.get(pk=policy.pk).superseded_by_id is None


def test_deprecating_a_challenged_fact_without_a_reason_is_refused_beside_the_field(world, client):
    doubted = challenged(world.planner, world.conventions, "port", "The dev server listens on 8000.")
    client.force_login(world.reviewer)
    url = reverse("review:queue-decide", args=["challenged", doubted.pk])
    response = client.post(url, {"action": "deprecate", "reason": "  "}, **HX)
    assert response.status_code == 422
    assert 'data-testid="error-reason"' in response.content.decode()
    assert Fact.objects.get(pk=doubted.pk).status == "challenged"
    assert client.post(url, {"action": "deprecate", "reason": "It moved."}, **HX).status_code == 200
    assert Fact.objects.get(pk=doubted.pk).status == "deprecated"


def test_a_refused_policy_budget_answers_422_with_the_typed_value_beside_its_error(world, client):
    client.force_login(world.admin_user)
    before = Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars
    url = reverse("review:policy-budget", args=[world.workspace.slug])
    response = client.post(url, {"policy_budget_chars": "12abc"}, **HX)
    html = response.content.decode()
    assert response.status_code == 422
    assert 'value="12abc"' in html
    assert 'data-testid="error-budget"' in html and "A whole number of characters" in html
    assert Workspace.objects.get(pk=world.workspace.pk).policy_budget_chars == before


def test_a_refused_erasure_selection_names_its_field_and_keeps_it(world, client):
    client.force_login(world.admin_user)
    response = client.get(ERASE, {"kind": "ids", "ids": "7, seven"})
    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="error-ids"' in html and "fact ids are positive integers" in html
    assert 'value="7, seven"' in html and 'aria-describedby="error-ids"' in html


def test_a_refused_erasure_keeps_the_preview_the_reason_and_the_tick(world, client):
    secret = fact(world.coder, world.architecture, "people", "Carol lives at 12 Elm Row.")
    client.force_login(world.admin_user)
    selection = {"kind": "ids", "ids": str(secret.pk), "previewed": str(secret.pk)}
    blank = client.post(ERASE, {**selection, "reason": "   ", "confirm": "yes"}).content.decode()
    assert 'data-testid="error-reason"' in blank and 'data-testid="erase-preview-result"' in blank
    assert 'data-testid="erase-sure" checked' in blank
    unticked = client.post(ERASE, {**selection, "reason": "an erasure request"})
    html = unticked.content.decode()
    assert unticked.status_code == 400
    assert 'data-testid="error-confirm"' in html and ">an erasure request</textarea>" in html
    assert Fact.objects.filter(pk=secret.pk).exists()


def test_an_erasure_whose_selection_changed_shows_the_new_preview_unticked_with_the_reason(world, client):
    secret = fact(world.coder, world.architecture, "people", "Carol lives at 12 Elm Row.")
    other = fact(world.coder, world.architecture, "people", "Dan lives at 3 Oak Street.")
    client.force_login(world.admin_user)
    ids = f"{secret.pk},{other.pk}"
    data = {"kind": "ids", "ids": ids, "previewed": str(secret.pk), "reason": "a request", "confirm": "yes"}
    response = client.post(ERASE, data)
    html = response.content.decode()
    assert response.status_code == 409
    assert "Dan lives at 3 Oak Street." in html and ">a request</textarea>" in html
    assert 'data-testid="erase-sure" checked' not in html
    assert Fact.objects.filter(pk__in=[secret.pk, other.pk]).count() == 2
