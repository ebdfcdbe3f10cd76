"""What runs the class and the machine, not what a chapter teaches.

The map:

- :mod:`classroom.grading`: the student edition of the notebooks, the sandboxed grader of a
  whole class and the plug-ins nbgrader's chain runs (``python -m classroom.grading``;
  ``make student``, ``make grade``, ``nbgrader/nbgrader_config.py``);
- :mod:`classroom.workspace`: the student's own copy of the notebooks, written once and never
  overwritten (``python -m classroom.workspace``; ``make lab``, ``make restore``);
- :mod:`classroom.kernels`: the lab's kernels forked from one pre-imported process, a Jupyter
  kernel provisioner (the kernelspec ``lab/kernels/python3``);
- :mod:`classroom.hub`: a class on JupyterHub on one machine: accounts, nbgrader's exchange, the
  hub (``python -m classroom.hub``; ``make class``).

The lessons' code is in ``course``; this package imports from it, never the other way round
(``tests/test_layout.py``), so a notebook runs without it and the grader's sandbox does not show
it to a submission. What a notebook or a chapter calls stays in ``course`` even when it serves
the machine: ``course.doctor`` (the machine check of the first notebook) and
``course.memory_release`` (registered by the model loader in every kernel).

Not handled here: the lessons, the models and the settings (``course``); nbgrader's own commands
(``make nbgrader-*``, with the course template in ``nbgrader/``). Importing the package imports
nothing else: the Jupyter server loads ``classroom.kernels`` without the course.
"""
