"""The Python client's methods (clients/python/engram_client) take the arguments of the operations
they call, under the same names: checked against the one declaration of each operation
(agents.operations.catalog), so a renamed or dropped argument cannot drift unseen. The client may
offer fewer arguments than the tool (a convenience subset), never another name."""

import inspect

import pytest

from agents.operations.catalog import OPERATIONS
from engram_client.client import EngramClient

CLIENT_TO_TOOL = {
    "me": "whoami",
    "preamble": "get_preamble",
    "search": "search_memory",
    "list_facts": "list_facts",
    "get_fact": "get_fact",
    "propose_fact": "propose_fact",
    "propose_facts": "propose_facts",
    "supersede_fact": "supersede_fact",
    "list_policies": "list_policies",
    "propose_policy": "propose_policy",
    "supersede_policy": "supersede_policy",
    "list_conflicts": "list_memory_conflicts",
    "get_notes": "get_my_notes",
    "update_notes": "update_my_notes",
    "record_observation": "record_observation",
    "remember": "remember",
    "consolidate": "consolidate_memory",
    "harmonize": "harmonize_memory",
    "create_episode": "create_episode",
    "submit_candidate": "submit_candidate",
    "record_replay": "record_replay",
    "promote": "promote_candidate",
    "create_run": "create_memory_run",
    "get_bank": "memory_get_bank",
    "update_status": "memory_update_status",
    "save_knowledge": "memory_save_knowledge",
    "save_procedural": "memory_save_procedural",
    "delete_item": "memory_delete",
    "intervene": "memory_log_decision",
    "finish_run": "finish_memory_run",
}
# The client's names for a path argument the tool names otherwise.
RENAMED = {"candidate_id": "candidate_pk", "item_id": "id"}
# submit_candidate takes the awtl document whole: its keys are the operation's arguments.
DOCUMENT = {"submit_candidate": {"document"}}


def test_every_operation_method_of_the_client_is_mapped():
    methods = {name for name, _ in inspect.getmembers(EngramClient, inspect.isfunction) if not name.startswith("_")}
    assert methods - {"request"} == set(CLIENT_TO_TOOL)


@pytest.mark.parametrize("method", sorted(CLIENT_TO_TOOL))
def test_each_client_method_takes_its_operations_arguments_by_their_names(method):
    parameters = [p for p in inspect.signature(getattr(EngramClient, method)).parameters if p != "self"]
    taken = {RENAMED.get(name, name) for name in parameters if not name.startswith("_")} - DOCUMENT.get(method, set())
    declared = set(OPERATIONS[CLIENT_TO_TOOL[method]].argument_names())
    assert taken - declared == set(), f"{method} takes arguments {CLIENT_TO_TOOL[method]} does not declare"
