import unittest

from title_case import title_case


class TitleCaseTest(unittest.TestCase):
    def test_one_word(self):
        self.assertEqual(title_case("hello"), "Hello")

    def test_the_rest_of_a_word_is_lowered(self):
        self.assertEqual(title_case("hELLO wORLD"), "Hello World")

    def test_small_words_stay_lower_case(self):
        self.assertEqual(title_case("the lord of the rings"), "The Lord of the Rings")

    def test_a_small_first_word_is_capitalised(self):
        self.assertEqual(title_case("a tale and a song"), "A Tale and a Song")

    def test_spaces_are_collapsed(self):
        self.assertEqual(title_case("  war   and  peace "), "War and Peace")
