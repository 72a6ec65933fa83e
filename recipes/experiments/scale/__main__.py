from recipes.experiments.scale.recipe import main

main()
