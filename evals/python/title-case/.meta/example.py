SMALL = {"a", "an", "and", "of", "the"}


def title_case(sentence):
    words = sentence.lower().split()
    return " ".join(
        w if i and w in SMALL else w[:1].upper() + w[1:] for i, w in enumerate(words)
    )
