import unittest

from intervals import merge


class MergeTest(unittest.TestCase):
    def test_empty(self) -> None:
        self.assertEqual(merge([]), [])

    def test_disjoint_stay_apart(self) -> None:
        self.assertEqual(merge([(1, 2), (5, 6)]), [(1, 2), (5, 6)])

    def test_overlapping_merge(self) -> None:
        self.assertEqual(merge([(1, 4), (3, 6)]), [(1, 6)])

    def test_unsorted_input(self) -> None:
        self.assertEqual(merge([(8, 9), (1, 3), (2, 4)]), [(1, 4), (8, 9)])

    def test_contained_interval_keeps_the_outer_end(self) -> None:
        self.assertEqual(merge([(1, 10), (2, 3)]), [(1, 10)])

    def test_touching_intervals_merge(self) -> None:
        self.assertEqual(merge([(1, 2), (3, 5)]), [(1, 5)])

    def test_input_is_not_changed(self) -> None:
        given = [(5, 6), (1, 2)]
        merge(given)
        self.assertEqual(given, [(5, 6), (1, 2)])


if __name__ == "__main__":
    unittest.main()
