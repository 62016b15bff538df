import unittest

from running_total import running_total


class RunningTotalTest(unittest.TestCase):
    def test_empty_list(self):
        self.assertEqual(running_total([]), [])

    def test_one_number(self):
        self.assertEqual(running_total([7]), [7])

    def test_several_numbers(self):
        self.assertEqual(running_total([1, 2, 3, 4]), [1, 3, 6, 10])

    def test_negative_numbers(self):
        self.assertEqual(running_total([5, -2, -3]), [5, 3, 0])

    def test_the_input_is_not_changed(self):
        numbers = [1, 1]
        running_total(numbers)
        self.assertEqual(numbers, [1, 1])
