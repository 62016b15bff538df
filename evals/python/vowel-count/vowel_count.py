def count_vowels(text):
    pass
