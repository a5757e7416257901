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

        # Web processes load the embedding model in the background at start, so the first
        # search does not pay the ~5 s torch import.
        if os.environ.get("ENGRAM_PRELOAD_MODEL") == "1":
            threading.Thread(target=_preload, name="engram-model-preload", daemon=True).start()

        # The daily jobs in the embedded mode (no `celery beat`): only with ENGRAM_SCHEDULER on.
        from memory import scheduler

        scheduler.start()
