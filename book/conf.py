"""Sphinx configuration of the workbook's website (built by book/build.py; see its docstring).

The notebooks arrive executed: myst-nb renders their saved outputs and runs nothing. Nothing is
loaded from the network (the default alabaster theme, no MathJax, no widget manager).
"""

project = "Tool use, code agents and conversation memory"
author = "the workbook's authors"
extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_output_stderr = "show"
exclude_patterns = ["**.ipynb_checkpoints"]
html_theme = "alabaster"
html_title = project
html_theme_options = {"page_width": "1180px", "sidebar_width": "250px",
                      "show_relbars": True}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False
html_show_copyright = False
suppress_warnings = ["mystnb.unknown_mime_type", "misc.highlighting_failure"]
