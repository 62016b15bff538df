from hub.faces.entry import main

main()
