# nbgrader configuration of this course: `nbgrader <command>` run from the repository root works
# on the course directory course/ (built sources, releases, submissions and gradebook.db).
from autograder.build import nbgrader_config

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.merge(nbgrader_config())
