from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api import views

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
