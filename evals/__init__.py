"""Shipped suites. Each module is sent whole into the exam hall and imported only there."""
