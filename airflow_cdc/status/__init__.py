"""What the pipelines are doing, read from the metadata DB: ``airflow-cdc status``'s report
(:mod:`.report`) and the CDC page's model (:mod:`.pipelines`, read by :mod:`.reading`,
drawn by :mod:`.page_html`). Plain Python: the Airflow plugin (``plugins.cdc_page``) and
the CLI call it."""
