"""The MkDocs hooks of the docs website, named by mkdocs.yml (`hooks:`): MkDocs loads this file
by its path, so it only hands over the hooks of tapeml.faces.docs.site, where they are written."""
from tapeml.faces.docs.site import on_config, on_files, on_page_content, on_page_markdown, on_post_build  # noqa: F401
