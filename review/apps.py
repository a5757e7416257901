from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Remember reviews travel in workspace files; memory cannot import this app, so it asks.
        from review import portability

        portability.register()

        # Remember review items take part in every erasure preview and erasure (issue 21).
        from memory.services import erasure
        from review.erasure import RememberReviewErasure

        erasure.register(RememberReviewErasure())
