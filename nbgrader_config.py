# nbgrader configuration of this course: `nbgrader <command>` run from the repository root works
# on the course directory course/ (built sources, releases, submissions and gradebook.db).
from autograder.course.build import nbgrader_config
from autograder.engine.gradebook import feedback_config

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.merge(nbgrader_config())
# nbgrader's own feedback (generate_feedback, formgrader's "Generate Feedback") strips hidden tests.
feedback_config(c)
