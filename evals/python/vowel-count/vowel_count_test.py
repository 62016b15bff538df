import unittest

from vowel_count import count_vowels


class VowelCountTest(unittest.TestCase):
    def test_empty_text_has_no_vowels(self):
        self.assertEqual(count_vowels(""), 0)

    def test_lower_case_vowels(self):
        self.assertEqual(count_vowels("banana"), 3)

    def test_upper_case_vowels_count_too(self):
        self.assertEqual(count_vowels("AEIOU"), 5)

    def test_y_is_not_a_vowel(self):
        self.assertEqual(count_vowels("rhythm"), 0)

    def test_punctuation_and_spaces_are_ignored(self):
        self.assertEqual(count_vowels("Hi, you!"), 3)
