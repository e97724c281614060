"""The app's shared core: the sidebar and its controls, the URL's parameters, navigation,
the cached runners, the chart cache and styles, UI building blocks. It never imports a page's
feature (app/features/)."""
