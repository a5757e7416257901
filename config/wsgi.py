import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from config.debug import last_resort

# Django's handler, wrapped so that an exception escaping it still ends the request (closing its
# database connection) and answers 500 (config.debug).
application = last_resort(get_wsgi_application())
