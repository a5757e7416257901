import os
import threading

from django.apps import AppConfig


def _preload() -> None:
    """The embedding model, then the write classifier's pair model when it is on (its ONNX file is
    exported on first use, once per ENGRAM_HOME)."""
    from memory import pair_model
    from memory.embeddings import get_model

    get_model()
    if pair_model.enabled():
        pair_model.get()


def _forget_rights_on_change() -> None:
    """memory.access.forget_rights on every change to memberships, workspaces, domains, reviewer
    permissions (guardian's rows, a person's or a group's) and group membership."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import m2m_changed, post_delete, post_save
    from guardian.models import GroupObjectPermission, UserObjectPermission

    from memory.access import forget_rights
    from memory.models import MemoryDomain, Workspace, WorkspaceMembership

    for model in (WorkspaceMembership, Workspace, MemoryDomain, UserObjectPermission, GroupObjectPermission):
        for signal in (post_save, post_delete):
            signal.connect(forget_rights, sender=model, dispatch_uid=f"engram-rights-{signal}-{model.__name__}")
    m2m_changed.connect(forget_rights, sender=get_user_model().groups.through, dispatch_uid="engram-rights-user-groups")


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks services queue by name (memory.services.embedding.schedule_embedding).
        from memory import tasks  # noqa: F401

        # The write classifier is a library without Django or Engram imports (memory.classifier):
        # its readings of texts join the caches an erasure drops from here.
        from memory.caches import register_cache
        from memory.classifier import forget_readings

        register_cache(forget_readings)

        # What people hold, remembered per request by memory.access: any change is read anew.
        _forget_rights_on_change()

        # Web processes load the embedding model in the background at start, so the first
        # search does not pay the ~5 s torch import.
        if os.environ.get("ENGRAM_PRELOAD_MODEL") == "1":
            threading.Thread(target=_preload, name="engram-model-preload", daemon=True).start()

        # The daily jobs in the embedded mode (no `celery beat`): only with ENGRAM_SCHEDULER on.
        from memory import scheduler

        scheduler.start()
