def title_case(sentence):
    pass
