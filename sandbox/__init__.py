"""What runs inside the exam hall: the worker, the agent loop, tools, models and judges.

This package uses only the standard library, so the sandbox image needs nothing from a
package index, and it never imports the control plane (`service`).
"""
