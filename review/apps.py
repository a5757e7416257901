from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Remember reviews travel in workspace files; memory cannot import this app, so it asks.
        from review import portability

        portability.register()

        # Which review items (and so reviews, and audit events about them) a person sees depends
        # on the layer → domain mapping, which memory.access cannot import: it is told.
        from review import access

        access.register()

        # Remember review items take part in every erasure preview and erasure (issue 21).
        from memory.services import erasure
        from review.erasure import RememberReviewErasure

        erasure.register(RememberReviewErasure())
